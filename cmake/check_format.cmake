# The tree stays clang-formatted (.clang-format): `clang-format --dry-run --Werror` over every
# C++ file under src/, tests/ and bench/. Run as a test (label unit); alone:
#   cmake -DROOT=$PWD -P cmake/check_format.cmake
# Without clang-format it says so, and the test counts as skipped (SKIP_REGULAR_EXPRESSION):
# `scripts/setup.sh test` installs it. Fix a failure with `clang-format -i` on the files it names.
find_program(CLANG_FORMAT NAMES clang-format clang-format-14)
if(NOT CLANG_FORMAT)
  message("clang-format not found: the format check is skipped (scripts/setup.sh test installs it)")
  return()
endif()
file(GLOB_RECURSE files ${ROOT}/src/*.cc ${ROOT}/src/*.h ${ROOT}/tests/*.cc ${ROOT}/tests/*.h
     ${ROOT}/bench/*.cc ${ROOT}/bench/*.h)
list(SORT files)
execute_process(COMMAND ${CLANG_FORMAT} --dry-run --Werror ${files} RESULT_VARIABLE rc
                ERROR_VARIABLE out OUTPUT_VARIABLE out2)
list(LENGTH files n)
if(NOT rc EQUAL 0)
  string(REGEX MATCHALL "[^\n]*: error: [^\n]*" errors "${out}")
  set(named "")
  foreach(e ${errors})
    string(REGEX REPLACE ":[0-9]+:[0-9]+: error:.*" "" f "${e}")
    list(APPEND named "${f}")
  endforeach()
  list(REMOVE_DUPLICATES named)
  list(JOIN named "\n  " named)
  message(FATAL_ERROR "not clang-formatted (run clang-format -i on them):\n  ${named}")
endif()
message("${n} files clang-formatted")
