adamant_test(NAME memory_stats_tests SOURCES memory_stats_test.cpp LIBS adamant_core)
