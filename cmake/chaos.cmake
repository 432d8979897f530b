# The fault campaign (scripts/chaos, tests/chaos/, docs/faults.md): two instances
# behind nginx, Redis, the platform simulator, a seeded fault schedule and a checker.
# The registered run is 60 seconds with a fixed seed; it is judged by the checker
# and by counts (calls made, faults applied), never by speed. It runs alone (it
# loads both cores) and is skipped (77) without redis-server or nginx.
find_program(NODE_EXECUTABLE_CHAOS node)
if(NODE_EXECUTABLE_CHAOS)
  add_test(NAME chaos
           COMMAND ${NODE_EXECUTABLE_CHAOS} ${CMAKE_SOURCE_DIR}/tests/chaos/main.mjs
                   --seed 7 --seconds 60 --min-calls 100 --min-faults 10)
  set_tests_properties(chaos PROPERTIES
                       ENVIRONMENT "CL_BIN=$<TARGET_FILE:context-loader>;CL_LUA_MAX_RUN_MS=1000"
                       TIMEOUT 600 RUN_SERIAL TRUE SKIP_RETURN_CODE 77 LABELS "chaos;integration")
  # the checker and the schedule on their own (synthetic histories)
  add_test(NAME chaos_checker COMMAND ${NODE_EXECUTABLE_CHAOS} --test ${CMAKE_SOURCE_DIR}/tests/chaos/)
  set_tests_properties(chaos_checker PROPERTIES TIMEOUT 60 LABELS "chaos")
endif()
