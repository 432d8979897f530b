# Area "conf": the key table, the typed settings it generates, file + environment
# loading and the gates.
add_executable(test_conf ${CMAKE_SOURCE_DIR}/tests/unit/test_conf.c)
target_link_libraries(test_conf PRIVATE clcore)
target_include_directories(test_conf PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit)
add_test(NAME unit_conf COMMAND test_conf)
set_tests_properties(unit_conf PROPERTIES TIMEOUT 60 LABELS "unit")
