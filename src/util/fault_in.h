#pragma once
// FaultIn: maps every page of [p, p + bytes) now, with one write per page
// (the kernel zero-fills a page on its first fault; a huge page takes the
// first write), so that later writes into the memory, e.g. inside a
// request, take no page faults. Writes zero there: for memory whose contents
// do not matter yet. Volatile, so that the compiler keeps writes whose values
// nobody reads.

#include <cstddef>

#include <unistd.h>

namespace agentkv {

inline void FaultIn(void* p, size_t bytes) {
  if (bytes == 0) return;
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  volatile unsigned char* at = static_cast<unsigned char*>(p);
  for (size_t off = 0; off < bytes; off += page) at[off] = 0;
  at[bytes - 1] = 0;
}

}  // namespace agentkv
