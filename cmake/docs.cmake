# Documentation that carries code is tested too.
add_test(NAME readme_example COMMAND sh ${CMAKE_SOURCE_DIR}/tests/readme-example.sh
         $<TARGET_FILE:context-loader> ${CMAKE_SOURCE_DIR})
add_test(NAME check_tools_shipped COMMAND $<TARGET_FILE:context-loader> --check-tools
         ${CMAKE_SOURCE_DIR}/tools)
set_tests_properties(readme_example check_tools_shipped PROPERTIES LABELS "docs" TIMEOUT 60
                     ENVIRONMENT "CL_LUA_DIR=${CMAKE_SOURCE_DIR}/lua")
