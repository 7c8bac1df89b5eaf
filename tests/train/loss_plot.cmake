# Loss-curve pictures (cairo).
if(CAIRO_FOUND)
  adamant_test(NAME loss_plot_tests SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/loss_plot_test.cpp LIBS adamant_train PkgConfig::CAIRO)
endif()
