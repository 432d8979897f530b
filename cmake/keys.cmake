# Operation key and idempotency input hash (area "integration"): C unit test over
# the clcore library, which holds flow.c and idem.c.
add_executable(test_keys ${CMAKE_SOURCE_DIR}/tests/unit/test_keys.c)
target_link_libraries(test_keys PRIVATE clcore)
add_test(NAME unit_keys COMMAND test_keys)
set_tests_properties(unit_keys PROPERTIES TIMEOUT 60)
# Session ids (session.c): bound to the principal and the secret, the same answers
# when checked again.
add_executable(test_session ${CMAKE_SOURCE_DIR}/tests/unit/test_session.c)
target_link_libraries(test_session PRIVATE clcore)
add_test(NAME unit_session COMMAND test_session)
set_tests_properties(unit_session PROPERTIES TIMEOUT 60)
# The token estimate (codec/tokproxy.c) against real o200k counts of the demo results.
add_executable(test_tokproxy ${CMAKE_SOURCE_DIR}/tests/unit/test_tokproxy.c)
target_link_libraries(test_tokproxy PRIVATE clcore)
add_test(NAME unit_tokproxy COMMAND test_tokproxy)
set_tests_properties(unit_tokproxy PROPERTIES TIMEOUT 60)
# Confirmation by a person (confirm.c): which calls confirm.tools names, and the
# signed state bound to principal, tool, arguments, interaction and secret.
add_executable(test_confirm ${CMAKE_SOURCE_DIR}/tests/unit/test_confirm.c)
target_link_libraries(test_confirm PRIVATE clcore)
add_test(NAME unit_confirm COMMAND test_confirm)
set_tests_properties(unit_confirm PROPERTIES TIMEOUT 60)
