#include "util/warm_memory.h"

#include <algorithm>
#include <new>

#include "util/fault_in.h"

namespace agentkv {

WarmMemory::~WarmMemory() {
  MutexLock l(&mu_);  // no other thread holds the reserve now (its last owner is going)
  for (auto& [bytes, c] : classes_) {
    for (void* p : c.held) ::operator delete(p);
  }
}

void WarmMemory::SetTargets(const std::vector<std::pair<size_t, size_t>>& targets) {
  std::vector<void*> to_free;
  {
    MutexLock l(&mu_);
    for (auto& [bytes, c] : classes_) c.target = 0;
    for (const auto& [bytes, count] : targets) {
      if (bytes >= kMinBytes) classes_[bytes].target += count;
    }
    for (auto& [bytes, c] : classes_) {
      while (c.held.size() > c.target) {
        to_free.push_back(c.held.back());
        c.held.pop_back();
        held_bytes_ -= bytes;
      }
    }
  }
  for (void* p : to_free) ::operator delete(p);
}

void WarmMemory::FillShare(size_t share, size_t n_shares) {
  if (n_shares == 0 || share >= n_shares) return;
  std::vector<std::pair<size_t, size_t>> plan;  // (bytes, buffers this share fills)
  {
    MutexLock l(&mu_);
    for (auto& [bytes, c] : classes_) {
      const size_t quota = c.target * (share + 1) / n_shares - c.target * share / n_shares;
      const size_t lack = c.target - std::min(c.target, c.held.size() + c.filling);
      const size_t n = std::min(quota, lack);
      if (n == 0) continue;
      c.filling += n;
      plan.emplace_back(bytes, n);
    }
  }
  for (const auto& [bytes, n] : plan) {
    std::vector<void*> made;
    made.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      void* p = ::operator new(bytes);
      FaultIn(p, bytes);
      made.push_back(p);
    }
    std::vector<void*> extra;  // the target shrank meanwhile
    {
      MutexLock l(&mu_);
      SizeClass& c = classes_[bytes];
      c.filling -= n;
      for (void* p : made) {
        if (c.held.size() < c.target) {
          c.held.push_back(p);
          held_bytes_ += bytes;
        } else {
          extra.push_back(p);
        }
      }
    }
    for (void* p : extra) ::operator delete(p);
  }
}

void* WarmMemory::Take(size_t bytes) {
  if (bytes < kMinBytes) return nullptr;
  MutexLock l(&mu_);
  auto it = classes_.find(bytes);
  if (it == classes_.end() || it->second.held.empty()) return nullptr;
  void* p = it->second.held.back();
  it->second.held.pop_back();
  held_bytes_ -= bytes;
  taken_bytes_ += bytes;
  return p;
}

bool WarmMemory::Give(void* p, size_t bytes) {
  if (bytes < kMinBytes) return false;
  MutexLock l(&mu_);
  auto it = classes_.find(bytes);
  if (it == classes_.end() || it->second.held.size() >= it->second.target) return false;
  it->second.held.push_back(p);
  held_bytes_ += bytes;
  return true;
}

size_t WarmMemory::HeldBytes() const {
  MutexLock l(&mu_);
  return held_bytes_;
}

uint64_t WarmMemory::TakenBytes() const {
  MutexLock l(&mu_);
  return taken_bytes_;
}

size_t WarmMemory::TargetBytes() const {
  MutexLock l(&mu_);
  size_t total = 0;
  for (const auto& [bytes, c] : classes_) total += bytes * c.target;
  return total;
}

}  // namespace agentkv
