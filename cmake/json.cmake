# JSON codec tests (area "json"): C unit tests, corpora, JSONTestSuite, busted spec, fuzzing.
set(CL_JSON_SOURCES ${CMAKE_SOURCE_DIR}/src/base/json.c ${CL_JSON_LUA_SOURCES}
                    ${CMAKE_SOURCE_DIR}/src/base/util.c)

if(NOT CL_CHECKS_DIR)
  if(EXISTS ${CMAKE_SOURCE_DIR}/../shared/checks)
    get_filename_component(CL_CHECKS_DIR ${CMAKE_SOURCE_DIR}/../shared/checks ABSOLUTE)
  else()
    set(CL_CHECKS_DIR /work/shared/checks)
  endif()
endif()
set(CL_JSON_CORPUS ${CMAKE_SOURCE_DIR}/tests/unit/json_corpus)
set(CL_JSONTESTSUITE ${CL_CHECKS_DIR}/JSONTestSuite)

add_executable(test_json ${CMAKE_SOURCE_DIR}/tests/unit/test_json.c ${CL_JSON_SOURCES})
target_include_directories(test_json PRIVATE )
target_link_libraries(test_json PRIVATE PkgConfig::LUA PkgConfig::CRYPTO m)

add_test(NAME json_unit COMMAND test_json unit)
add_test(NAME json_corpus COMMAND test_json corpus ${CL_JSON_CORPUS})
# Exits 77 (skipped) when the public suite is not on this machine.
add_test(NAME json_testsuite COMMAND test_json suite ${CL_JSONTESTSUITE})
set_tests_properties(json_testsuite PROPERTIES SKIP_RETURN_CODE 77)

# busted spec for the Lua API, loading cljson.so from the build tree.
add_test(NAME json_spec
         COMMAND lua5.4 /usr/bin/busted --output=plainTerminal tests/spec/json_spec.lua
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set(CL_JSON_SPEC_ENV "CLJSON_CPATH=$<TARGET_FILE_DIR:cljson>/?.so")
list(APPEND CL_JSON_SPEC_ENV ${CL_LUA_SANITIZER_ENV})
set_tests_properties(json_spec PROPERTIES ENVIRONMENT "${CL_JSON_SPEC_ENV}" TIMEOUT 60)

# Fuzzing: a real libFuzzer target with CL_FUZZ=ON (clang), otherwise the same
# harness with a small main() that replays the corpora.
if(CL_FUZZ)
  add_executable(fuzz_json ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_json.c
                           ${CMAKE_SOURCE_DIR}/src/base/json.c ${CMAKE_SOURCE_DIR}/src/base/util.c)
  target_include_directories(fuzz_json PRIVATE )
  target_compile_options(fuzz_json PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_json PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_json PRIVATE PkgConfig::CRYPTO m)
  # New inputs go to the first directory (in the build tree), never the source corpus.
  file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz_json_corpus)
  add_test(NAME json_fuzz
           COMMAND fuzz_json -max_total_time=30 -timeout=5 -rss_limit_mb=2048 -max_len=65536
                   -artifact_prefix=${CMAKE_BINARY_DIR}/fuzz_json-
                   ${CMAKE_BINARY_DIR}/fuzz_json_corpus ${CL_JSON_CORPUS})
  set_tests_properties(json_fuzz PROPERTIES TIMEOUT 120)
else()
  add_executable(fuzz_json ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_json.c
                           ${CMAKE_SOURCE_DIR}/src/base/json.c ${CMAKE_SOURCE_DIR}/src/base/util.c)
  target_include_directories(fuzz_json PRIVATE )
  target_compile_definitions(fuzz_json PRIVATE CL_FUZZ_DRIVER=1)
  target_link_libraries(fuzz_json PRIVATE PkgConfig::CRYPTO m)
  add_test(NAME json_fuzz_replay COMMAND fuzz_json ${CL_JSON_CORPUS}
                                         ${CL_JSONTESTSUITE}/test_parsing
                                         ${CL_JSONTESTSUITE}/test_transform)
  set_tests_properties(json_fuzz_replay PROPERTIES TIMEOUT 60)
endif()

# The direct Lua decoder (cljson.decode) against the former tree path: every file
# of the corpora (missing directories are skipped) and 5000 generated texts.
add_test(NAME json_lua_decode
         COMMAND test_json decode ${CL_JSON_CORPUS} ${CL_JSONTESTSUITE}/test_parsing
                 ${CL_JSONTESTSUITE}/test_transform)
set_tests_properties(json_lua_decode PROPERTIES TIMEOUT 300)
