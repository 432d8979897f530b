# Redis backend of the state store (area "scale-out": replicas share one store): C unit test against
# a real redis-server started by the test (skipped with 77 when it is missing).
add_executable(test_store_redis ${CMAKE_SOURCE_DIR}/tests/unit/test_store_redis.c
                                ${CMAKE_SOURCE_DIR}/src/store/store.c ${CMAKE_SOURCE_DIR}/src/base/metrics.c ${CMAKE_SOURCE_DIR}/src/store/store_redis.c
                                ${CMAKE_SOURCE_DIR}/src/base/log.c ${CMAKE_SOURCE_DIR}/src/base/json.c
                                ${CMAKE_SOURCE_DIR}/src/base/util.c)
target_include_directories(test_store_redis PRIVATE )
target_link_libraries(test_store_redis PRIVATE PkgConfig::LIBEVENT PkgConfig::CRYPTO
                      PkgConfig::HIREDIS m)
add_test(NAME unit_store_redis COMMAND test_store_redis)
set_tests_properties(unit_store_redis PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77)
