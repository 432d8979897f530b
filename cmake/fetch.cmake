# Areas "fetch" and "auth": the curl-multi client and token introspection.
# The tests compile their sources directly (not clcore) so that half-written modules
# elsewhere in src/ cannot break them.
set(CL_FETCH_TEST_SOURCES ${CMAKE_SOURCE_DIR}/src/upstream/fetch.c ${CMAKE_SOURCE_DIR}/src/upstream/hclient.c ${CMAKE_SOURCE_DIR}/src/base/util.c)

add_executable(test_fetch ${CMAKE_SOURCE_DIR}/tests/unit/test_fetch.c ${CL_FETCH_TEST_SOURCES})
target_include_directories(test_fetch PRIVATE
                                              ${CMAKE_SOURCE_DIR}/tests/unit)
target_link_libraries(test_fetch PRIVATE PkgConfig::LIBEVENT PkgConfig::CURL PkgConfig::CRYPTO)
add_test(NAME unit_fetch COMMAND test_fetch)
# Timeouts are liveness caps, not speed bounds: unit_fetch spends about 30 s waiting on
# its own timers (0.5 s of CPU) and took 43 s at load 15; a loaded machine fires each
# timer later still.
set_tests_properties(unit_fetch PROPERTIES TIMEOUT 600 LABELS "unit;fetch")

add_executable(test_auth ${CMAKE_SOURCE_DIR}/tests/unit/test_auth.c ${CMAKE_SOURCE_DIR}/src/http/auth.c ${CMAKE_SOURCE_DIR}/src/base/metrics.c
                         ${CMAKE_SOURCE_DIR}/src/base/json.c ${CL_FETCH_TEST_SOURCES})
target_include_directories(test_auth PRIVATE
                                             ${CMAKE_SOURCE_DIR}/tests/unit)
target_link_libraries(test_auth PRIVATE PkgConfig::LIBEVENT PkgConfig::CURL PkgConfig::CRYPTO m)
add_test(NAME unit_auth COMMAND test_auth)
set_tests_properties(unit_auth PROPERTIES TIMEOUT 300 LABELS "unit;auth")
