# Area "log": the one writer of log lines (order of the leading members, escaping,
# worker and role, nested lines).
add_executable(test_log ${CMAKE_SOURCE_DIR}/tests/unit/test_log.c)
target_link_libraries(test_log PRIVATE clcore)
target_include_directories(test_log PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit)
add_test(NAME unit_log COMMAND test_log)
set_tests_properties(unit_log PROPERTIES TIMEOUT 60 LABELS "unit")
