adamant_test(NAME safetensors_tests SOURCES safetensors_test.cpp LIBS adamant_core)
