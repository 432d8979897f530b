# Area "upstream": the checks and encodings of a tool's upstream request (methods,
# paths, headers, query, traceparent) as pure functions.
add_executable(test_upstream_req ${CMAKE_SOURCE_DIR}/tests/unit/test_upstream_req.c)
target_link_libraries(test_upstream_req PRIVATE clcore)
target_include_directories(test_upstream_req PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit)
add_test(NAME unit_upstream_req COMMAND test_upstream_req)
set_tests_properties(unit_upstream_req PROPERTIES TIMEOUT 60 LABELS "unit")
