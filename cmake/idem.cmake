# State store and idempotency records (area "store" / "idem"): C unit tests.
set(CL_IDEM_SOURCES ${CMAKE_SOURCE_DIR}/src/store/store.c ${CMAKE_SOURCE_DIR}/src/base/metrics.c ${CMAKE_SOURCE_DIR}/src/store/store_memory.c
                    ${CMAKE_SOURCE_DIR}/src/flow/idem.c ${CMAKE_SOURCE_DIR}/src/base/json.c
                    ${CMAKE_SOURCE_DIR}/src/base/util.c)

add_executable(test_store ${CMAKE_SOURCE_DIR}/tests/unit/test_store.c ${CL_IDEM_SOURCES})
target_include_directories(test_store PRIVATE )
target_link_libraries(test_store PRIVATE PkgConfig::LIBEVENT PkgConfig::CRYPTO m)

add_executable(test_idem ${CMAKE_SOURCE_DIR}/tests/unit/test_idem.c ${CL_IDEM_SOURCES})
target_include_directories(test_idem PRIVATE )
target_link_libraries(test_idem PRIVATE PkgConfig::LIBEVENT PkgConfig::CRYPTO m)

add_test(NAME unit_store COMMAND test_store)
add_test(NAME unit_idem COMMAND test_idem)
set_tests_properties(unit_store unit_idem PROPERTIES TIMEOUT 60)
