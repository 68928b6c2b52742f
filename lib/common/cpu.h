/* Processor hints for spin loops, inlined. A spinning thread tells the
 * processor so: x86's PAUSE (and aarch64's YIELD) let a sibling hardware
 * thread run and keep the loop from flooding the memory system with loads
 * of a line another core is about to write. Elsewhere the hint is empty;
 * callers bound their spins themselves and then sleep or queue. */
#ifndef SHMOBJ_CPU_H
#define SHMOBJ_CPU_H

static inline void shmobj__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif /* SHMOBJ_CPU_H */
