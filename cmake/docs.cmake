# Documentation that carries code is tested too.
add_test(NAME docs_tool_example COMMAND sh ${CMAKE_SOURCE_DIR}/tests/docs-tool-example.sh
         $<TARGET_FILE:context-loader> ${CMAKE_SOURCE_DIR})
add_test(NAME check_tools_shipped COMMAND $<TARGET_FILE:context-loader> --check-tools
         ${CMAKE_SOURCE_DIR}/tools)
set_tests_properties(docs_tool_example check_tools_shipped PROPERTIES LABELS "docs" TIMEOUT 60
                     ENVIRONMENT "CL_LUA_DIR=${CMAKE_SOURCE_DIR}/lua")
# The README's quick start, run as written against scripts/demo (skipped without curl/jq).
add_test(NAME readme_quickstart COMMAND sh ${CMAKE_SOURCE_DIR}/tests/readme-quickstart.sh
         $<TARGET_FILE:context-loader> ${CMAKE_SOURCE_DIR})
set_tests_properties(readme_quickstart PROPERTIES LABELS "docs" TIMEOUT 300 SKIP_RETURN_CODE 77)
