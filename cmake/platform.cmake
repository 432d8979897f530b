# Platform simulator (tests/platform/): Node 20, built-in modules only.
find_program(NODE_EXECUTABLE NAMES node nodejs)
if(NODE_EXECUTABLE)
  add_test(NAME platform_simulator
           COMMAND ${NODE_EXECUTABLE} --test ${CMAKE_SOURCE_DIR}/tests/platform/
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(platform_simulator PROPERTIES TIMEOUT 900 LABELS "platform") # 10 s idle, 103 s seen at load 20
else()
  message(WARNING "node not found: the platform simulator tests are not registered")
endif()
