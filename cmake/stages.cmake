# The stage graph: one folder under src/ per stage, one library per stage, and the stages each
# may include and link (those stages' own dependencies come with them). CMakeLists.txt builds the
# libraries from this list and check_stages.cmake (the test StageGraph) fails on an #include that
# crosses it. docs/architecture.md draws the same graph.
set(TB_STAGES base numerics spec cost platform record store simulate analysis report
              model emulation runner jobs cli)
set(TB_STAGE_DEPS_base "")
set(TB_STAGE_DEPS_numerics base)
set(TB_STAGE_DEPS_spec base numerics)
set(TB_STAGE_DEPS_cost spec)
set(TB_STAGE_DEPS_platform spec)
set(TB_STAGE_DEPS_record spec cost platform)
set(TB_STAGE_DEPS_store record)
set(TB_STAGE_DEPS_simulate cost platform record)
set(TB_STAGE_DEPS_analysis store record simulate)
set(TB_STAGE_DEPS_report analysis)
# The stages below use LibTorch; the ones above build without it.
set(TB_TORCH_STAGES model emulation runner jobs cli)
set(TB_STAGE_DEPS_model spec cost numerics)
set(TB_STAGE_DEPS_emulation model record)
set(TB_STAGE_DEPS_runner model emulation record platform)
set(TB_STAGE_DEPS_jobs runner store)
set(TB_STAGE_DEPS_cli jobs runner report)

# TB_STAGE_CLOSURE_<stage>: the stage's dependencies and theirs, transitively.
foreach(stage IN LISTS TB_STAGES)
  set(closure "")
  set(todo ${TB_STAGE_DEPS_${stage}})
  while(todo)
    list(POP_FRONT todo dep)
    if(NOT dep IN_LIST closure)
      list(APPEND closure ${dep})
      list(APPEND todo ${TB_STAGE_DEPS_${dep}})
    endif()
  endwhile()
  set(TB_STAGE_CLOSURE_${stage} ${closure})
endforeach()
