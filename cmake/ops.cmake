# Area "ops": install layout and service unit. The reload, list_changed,
# metrics and sandbox tests are integration tests (tests/integration/reload.test.mjs,
# ops.test.mjs) run by the `integration` test; the reload benchmark
# (tests/bench/reload-bench.sh) is not part of the test run.
add_test(NAME ops_install
         COMMAND sh ${CMAKE_SOURCE_DIR}/tests/integration/install-check.sh ${CMAKE_BINARY_DIR})
set_tests_properties(ops_install PROPERTIES TIMEOUT 300 LABELS "ops")

add_executable(test_metrics ${CMAKE_SOURCE_DIR}/tests/unit/test_metrics.c
                            ${CMAKE_SOURCE_DIR}/src/base/metrics.c ${CMAKE_SOURCE_DIR}/src/base/mshare.c
                            ${CMAKE_SOURCE_DIR}/src/base/util.c)
target_include_directories(test_metrics PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit)
target_link_libraries(test_metrics PRIVATE PkgConfig::CRYPTO m)
add_test(NAME unit_metrics COMMAND test_metrics)
set_tests_properties(unit_metrics PROPERTIES TIMEOUT 30 LABELS "unit;ops")

# The service manager's readiness protocol: the datagram itself, then the service
# (READY=1 once serving, STOPPING=1 on SIGTERM).
add_executable(test_sdnotify ${CMAKE_SOURCE_DIR}/tests/unit/test_sdnotify.c
                             ${CMAKE_SOURCE_DIR}/src/base/sdnotify.c)
target_include_directories(test_sdnotify PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit)
add_test(NAME unit_sdnotify COMMAND test_sdnotify $<TARGET_FILE:context-loader> ${CMAKE_SOURCE_DIR})
set_tests_properties(unit_sdnotify PROPERTIES TIMEOUT 60 LABELS "unit;ops")

# The installed kit: busted with the installed helper on the example tool, in a
# directory outside the repository (tests/integration/kit-check.sh).
if(CL_LUA54 AND CL_BUSTED)
  add_test(NAME ops_kit
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/integration/kit-check.sh ${CMAKE_BINARY_DIR} ${CL_LUA54}
                   ${CL_BUSTED})
  set_tests_properties(ops_kit PROPERTIES TIMEOUT 120 LABELS "ops"
                       ENVIRONMENT "${CL_LUA_SANITIZER_ENV}")
endif()
