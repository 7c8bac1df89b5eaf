#pragma once
// Turns an MPI return code into adamant::Error. Communicators set
// MPI_ERRORS_RETURN so that failures reach this instead of aborting the job.
#include <mpi.h>

#include <string>

#include "adamant/core/error.h"

namespace adamant::comm {

inline std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error code " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(length));
}

inline void check_mpi(int code, const char* operation) {
  if (code != MPI_SUCCESS) fail("{} failed: {}", operation, mpi_error_text(code));
}

// True between MPI_Init and MPI_Finalize; destructors must not call MPI outside it.
inline bool mpi_is_active() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

}  // namespace adamant::comm
