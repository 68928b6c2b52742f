/* Reads that race with writers by design (optimistic reads, validated
 * afterwards by a sequence counter, a generation or a use count): the
 * thread sanitizer cannot follow that validation, so its builds ignore the
 * reads between SHMOBJ__RACY_BEGIN() and SHMOBJ__RACY_END() (writes,
 * atomics and locks stay tracked). Other builds compile them to nothing. */
#ifndef SHMOBJ_RACY_H
#define SHMOBJ_RACY_H

#if defined(__SANITIZE_THREAD__)
#define SHMOBJ__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SHMOBJ__TSAN 1
#endif
#endif

#if defined(SHMOBJ__TSAN)
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
#define SHMOBJ__RACY_BEGIN() AnnotateIgnoreReadsBegin(__FILE__, __LINE__)
#define SHMOBJ__RACY_END() AnnotateIgnoreReadsEnd(__FILE__, __LINE__)
#else
#define SHMOBJ__RACY_BEGIN() ((void)0)
#define SHMOBJ__RACY_END() ((void)0)
#endif

#endif
