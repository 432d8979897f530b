# Area "trace": the Trace Core client. The test compiles its sources directly (not
# clcore) so that half-written modules elsewhere in src/ cannot break it.
add_executable(test_trace ${CMAKE_SOURCE_DIR}/tests/unit/test_trace.c
                          ${CMAKE_SOURCE_DIR}/src/flow/trace.c ${CMAKE_SOURCE_DIR}/src/base/metrics.c ${CMAKE_SOURCE_DIR}/src/upstream/fetch.c ${CMAKE_SOURCE_DIR}/src/upstream/hclient.c ${CMAKE_SOURCE_DIR}/src/upstream/upstream_req.c
                          ${CMAKE_SOURCE_DIR}/src/base/json.c ${CMAKE_SOURCE_DIR}/src/base/util.c)
target_include_directories(test_trace PRIVATE
                                              ${CMAKE_SOURCE_DIR}/tests/unit)
target_link_libraries(test_trace PRIVATE PkgConfig::LIBEVENT PkgConfig::CURL PkgConfig::CRYPTO m)
add_test(NAME unit_trace COMMAND test_trace)
# (a liveness cap: about 8 s of timers under ASan on an idle machine)
set_tests_properties(unit_trace PROPERTIES TIMEOUT 300 LABELS "unit;trace")
