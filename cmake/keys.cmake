# Operation key (flow.c) and idempotency input hash (idem.c): C unit test over the
# clcore library, which holds both.
add_executable(test_operation_key ${CMAKE_SOURCE_DIR}/tests/unit/test_operation_key.c)
target_link_libraries(test_operation_key PRIVATE clcore)
add_test(NAME unit_operation_key COMMAND test_operation_key)
set_tests_properties(unit_operation_key PROPERTIES TIMEOUT 60 LABELS "unit")
# util.c: the buffer and its kept blocks, identifier bytes.
add_executable(test_util ${CMAKE_SOURCE_DIR}/tests/unit/test_util.c ${CMAKE_SOURCE_DIR}/src/base/util.c)
target_include_directories(test_util PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit)
target_link_libraries(test_util PRIVATE PkgConfig::CRYPTO m)
add_test(NAME unit_util COMMAND test_util)
set_tests_properties(unit_util PROPERTIES TIMEOUT 60 LABELS "unit")
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
# The token-saving view's texts against texts recorded on a corpus (codec/toonview.c).
add_executable(test_toonview ${CMAKE_SOURCE_DIR}/tests/unit/test_toonview.c)
target_link_libraries(test_toonview PRIVATE clcore)
add_test(NAME unit_toonview COMMAND test_toonview)
set_tests_properties(unit_toonview PROPERTIES TIMEOUT 60)
# Confirmation by a person (confirm.c): which calls confirm.tools names, and the
# signed state bound to principal, tool, arguments, interaction and secret.
add_executable(test_confirm ${CMAKE_SOURCE_DIR}/tests/unit/test_confirm.c)
target_link_libraries(test_confirm PRIVATE clcore)
add_test(NAME unit_confirm COMMAND test_confirm)
set_tests_properties(unit_confirm PROPERTIES TIMEOUT 60)
