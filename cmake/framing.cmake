# Area "framing": the pure request guards (HTTP/1.1 framing, Host/Origin, admin token,
# calls in flight per principal) as a C unit test over their sources, and the framing
# checker as a fuzz target (cmake/fuzz.cmake's cl_fuzz_target). The socket-level
# behaviour is tested by tests/integration/{framing,guards,limits,http1}.test.mjs, and the
# HTTP/1.1 server (hsrv.c) on a loopback socket by tests/unit/test_hsrv.c.
add_executable(test_framing ${CMAKE_SOURCE_DIR}/tests/unit/test_framing.c
                            ${CMAKE_SOURCE_DIR}/src/http/framing.c ${CMAKE_SOURCE_DIR}/src/base/util.c)
target_include_directories(test_framing PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit)
target_link_libraries(test_framing PRIVATE PkgConfig::CRYPTO m)
add_test(NAME unit_framing COMMAND test_framing)
set_tests_properties(unit_framing PROPERTIES TIMEOUT 30 LABELS "unit;framing")

add_executable(test_hostguard ${CMAKE_SOURCE_DIR}/tests/unit/test_hostguard.c
                              ${CMAKE_SOURCE_DIR}/src/http/hostguard.c ${CMAKE_SOURCE_DIR}/src/base/util.c)
target_include_directories(test_hostguard PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit)
target_link_libraries(test_hostguard PRIVATE PkgConfig::CRYPTO m)
add_test(NAME unit_hostguard COMMAND test_hostguard)
set_tests_properties(unit_hostguard PROPERTIES TIMEOUT 30 LABELS "unit;framing")

add_executable(test_plimit ${CMAKE_SOURCE_DIR}/tests/unit/test_plimit.c
                           ${CMAKE_SOURCE_DIR}/src/http/plimit.c ${CMAKE_SOURCE_DIR}/src/base/util.c)
target_include_directories(test_plimit PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit)
target_link_libraries(test_plimit PRIVATE PkgConfig::CRYPTO m)
add_test(NAME unit_plimit COMMAND test_plimit)
set_tests_properties(unit_plimit PROPERTIES TIMEOUT 30 LABELS "unit;framing")

add_executable(test_hsrv ${CMAKE_SOURCE_DIR}/tests/unit/test_hsrv.c ${CMAKE_SOURCE_DIR}/src/http/hsrv.c ${CMAKE_SOURCE_DIR}/src/base/metrics.c
                         ${CMAKE_SOURCE_DIR}/src/http/hsrv_head.c
                         ${CMAKE_SOURCE_DIR}/src/http/framing.c ${CMAKE_SOURCE_DIR}/src/base/log.c
                         ${CMAKE_SOURCE_DIR}/src/base/json.c ${CMAKE_SOURCE_DIR}/src/base/util.c)
target_include_directories(test_hsrv PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit)
target_link_libraries(test_hsrv PRIVATE PkgConfig::LIBEVENT PkgConfig::CRYPTO m)
add_test(NAME unit_hsrv COMMAND test_hsrv)
set_tests_properties(unit_hsrv PROPERTIES TIMEOUT 30 LABELS "unit;framing")
