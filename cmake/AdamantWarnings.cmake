# Warnings are errors for our own code (C++ and CUDA host code). The sanitizer build (another
# compiler and instrumentation, whose optimizer reports loops it could not vectorise) only
# reports them: the regular build enforces them.
function(adamant_warnings target)
  if(ADAMANT_SANITIZE)
    set(error_flag "")
  else()
    set(error_flag -Werror)
  endif()
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic ${error_flag} -Wno-unused-parameter>
    $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror,-Wno-unused-parameter>)
endfunction()
