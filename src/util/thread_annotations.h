#pragma once
// Clang's thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html),
// spelled as abseil's and LevelDB's port/thread_annotations.h spell them. With clang and
// -Wthread-safety (set for our code in the top CMakeLists.txt, as errors) the compiler checks
// that a GUARDED_BY field is touched only with its mutex held and that a REQUIRES function
// is called only by a holder. On other compilers every macro expands to nothing.
//
// Use them with util/mutex.h's Mutex: std::mutex carries no annotations in libstdc++.

#if defined(__clang__)
#define AGENTKV_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define AGENTKV_THREAD_ANNOTATION(x)
#endif

// A type that is a lock (Mutex).
#define CAPABILITY(x) AGENTKV_THREAD_ANNOTATION(capability(x))
// An RAII type that holds a lock for its lifetime (MutexLock).
#define SCOPED_CAPABILITY AGENTKV_THREAD_ANNOTATION(scoped_lockable)
// The field is read and written only with mutex `x` held.
#define GUARDED_BY(x) AGENTKV_THREAD_ANNOTATION(guarded_by(x))
// The pointee (not the pointer) is accessed only with `x` held.
#define PT_GUARDED_BY(x) AGENTKV_THREAD_ANNOTATION(pt_guarded_by(x))
// Lock ordering: this mutex is taken after / before the named ones.
#define ACQUIRED_AFTER(...) AGENTKV_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define ACQUIRED_BEFORE(...) AGENTKV_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
// REQUIRES: the caller holds the mutex(es); EXCLUDES: the caller must not.
#define REQUIRES(...) AGENTKV_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) AGENTKV_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define EXCLUDES(...) AGENTKV_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// The function takes / releases the mutex(es) (no argument: `this`).
#define ACQUIRE(...) AGENTKV_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) AGENTKV_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
// ... in shared (reader) mode: SharedMutex.
#define ACQUIRE_SHARED(...) AGENTKV_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) AGENTKV_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) AGENTKV_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// Tells the analysis the mutex is held (a run-time assertion, or a fact it cannot see).
#define ASSERT_CAPABILITY(x) AGENTKV_THREAD_ANNOTATION(assert_capability(x))
// The function returns a reference to the named mutex.
#define RETURN_CAPABILITY(x) AGENTKV_THREAD_ANNOTATION(lock_returned(x))
// Escape hatch for code the analysis cannot follow; say why beside each use.
#define NO_THREAD_SAFETY_ANALYSIS AGENTKV_THREAD_ANNOTATION(no_thread_safety_analysis)
