adamant_test(NAME model_kernels_tests
  SOURCES gemm_linear_test.cpp layernorm_test.cpp attention_test.cpp pointwise_model_test.cpp embedding_test.cpp
          cross_entropy_test.cpp
  LIBS adamant_kernels)
