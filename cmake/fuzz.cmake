# Area "fuzz": libFuzzer targets beyond the JSON codec (cmake/json.cmake has that
# one): the TOON encoder, JSON-RPC/MCP message handling, REST body handling and the
# bkn_context rules, the Lua JSON module (cljson) against its tree path, and the HTTP
# request framing checker (framing.c). With CL_FUZZ=ON (clang) each is a real libFuzzer
# binary under
# ASan/UBSan with a bounded CTest run (<target>_fuzz, label "fuzz"); otherwise the
# same harness is linked with tests/fuzz/replay.c and replays its seed corpus
# (including the regression inputs of past crashes) as <target>_fuzz_replay.
# Each target compiles the sources it needs, never clcore. docs/fuzzing.md says how
# to run them longer.
set(CL_FUZZ_DIR ${CMAKE_SOURCE_DIR}/tests/fuzz)
# Seconds per target in the bounded CTest run (scripts/test runs all of them).
set(CL_FUZZ_SECONDS 20 CACHE STRING "max_total_time of each bounded fuzz run")

function(cl_fuzz_target name)
  set(srcs ${CL_FUZZ_DIR}/fuzz_${name}.c)
  foreach(s ${ARGN}) # a file name, found in its layer's folder
    file(GLOB found ${CMAKE_SOURCE_DIR}/src/*/${s})
    if(NOT found)
      message(FATAL_ERROR "fuzz_${name}: no src/*/${s}")
    endif()
    list(APPEND srcs ${found})
  endforeach()
  set(corpus ${CL_FUZZ_DIR}/corpus/${name})
  if(CL_FUZZ)
    add_executable(fuzz_${name} ${srcs})
    target_compile_options(fuzz_${name} PRIVATE -fsanitize=fuzzer,address,undefined
                                                -fno-sanitize-recover=undefined)
    target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer,address,undefined)
    # New inputs go to the first directory (build tree), never the source corpus.
    file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz_${name}_corpus)
    add_test(NAME ${name}_fuzz
             COMMAND fuzz_${name} -max_total_time=${CL_FUZZ_SECONDS} -timeout=5
                     -rss_limit_mb=2048 -max_len=16384 -print_final_stats=1
                     -artifact_prefix=${CMAKE_BINARY_DIR}/fuzz_${name}-
                     ${CMAKE_BINARY_DIR}/fuzz_${name}_corpus ${corpus})
    set_tests_properties(${name}_fuzz PROPERTIES TIMEOUT 120 LABELS "fuzz")
  else()
    add_executable(fuzz_${name} ${srcs} ${CL_FUZZ_DIR}/replay.c)
    add_test(NAME ${name}_fuzz_replay COMMAND fuzz_${name} ${corpus})
    set_tests_properties(${name}_fuzz_replay PROPERTIES TIMEOUT 60 LABELS "fuzz_replay")
  endif()
  target_include_directories(fuzz_${name} PRIVATE ${CL_FUZZ_DIR})
  target_link_libraries(fuzz_${name} PRIVATE PkgConfig::CRYPTO m)
endfunction()

cl_fuzz_target(toon toon.c toonview.c tokproxy.c json.c util.c)
cl_fuzz_target(guard guard.c json.c util.c texts.c)
cl_fuzz_target(mcp mcp_msg.c mcp_era.c json.c util.c)
cl_fuzz_target(rest callcheck.c guard.c json.c util.c texts.c)
# The Lua JSON module: direct decoder vs the json_parse tree path (differential).
cl_fuzz_target(json_lua json_lua.c json_lua_decode.c json_lua_encode.c json.c util.c)
target_link_libraries(fuzz_json_lua PRIVATE PkgConfig::LUA)
cl_fuzz_target(framing framing.c hsrv_head.c)
# The lean HTTP client's response parser (hclient.c; the client part needs libevent).
cl_fuzz_target(hclient hclient.c util.c)
target_link_libraries(fuzz_hclient PRIVATE PkgConfig::LIBEVENT)
