#include "api/tenant_limiter.h"

namespace agentkv::api {

std::shared_ptr<void> TenantLimiter::Acquire(const std::string& namespace_id) {
  {
    MutexLock lock(&mu_);
    size_t& n = in_flight_[namespace_id];
    if (max_per_tenant_ > 0 && n >= max_per_tenant_) {
      if (n == 0) in_flight_.erase(namespace_id);
      return nullptr;
    }
    ++n;
  }
  // The deleter releases; the pointee is only a token.
  return std::shared_ptr<void>(new char(0), [this, namespace_id](void* p) {
    delete static_cast<char*>(p);
    Release(namespace_id);
  });
}

void TenantLimiter::Release(const std::string& namespace_id) {
  MutexLock lock(&mu_);
  auto it = in_flight_.find(namespace_id);
  if (it != in_flight_.end() && --it->second == 0) in_flight_.erase(it);
}

size_t TenantLimiter::in_flight(const std::string& namespace_id) const {
  MutexLock lock(&mu_);
  auto it = in_flight_.find(namespace_id);
  return it == in_flight_.end() ? 0 : it->second;
}

}  // namespace agentkv::api
