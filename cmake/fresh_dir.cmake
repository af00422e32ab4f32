# cmake -DDIR=path -P fresh_dir.cmake: DIR emptied of what it holds, then (re)created. What
# cannot be removed (a file system a killed test left mounted there) is reported and left, so
# one stale mount does not stop every test of the next run.
if(NOT DIR)
  message(FATAL_ERROR "fresh_dir.cmake: DIR is not set")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E rm -rf "${DIR}" RESULT_VARIABLE removed
                ERROR_VARIABLE why)
if(NOT removed EQUAL 0)
  message(WARNING "fresh_dir.cmake: could not empty ${DIR} (${why}); its leftovers stay")
endif()
file(MAKE_DIRECTORY "${DIR}")
