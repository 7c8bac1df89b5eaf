adamant_test(NAME rng_tests SOURCES rng_test.cpp LIBS adamant_core)
