# cmake -DDIR=path -P fresh_dir.cmake: DIR removed with what it holds, then created empty.
if(NOT DIR)
  message(FATAL_ERROR "fresh_dir.cmake: DIR is not set")
endif()
file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}")
