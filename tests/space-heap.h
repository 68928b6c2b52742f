/* A test space over a malloc'd buffer with the arena core: the object
 * layer's tests and fuzz target run without a segment (doc/architecture.md:
 * object never calls the operating system). */
#ifndef SHMOBJ_TEST_SPACE_HEAP_H
#define SHMOBJ_TEST_SPACE_HEAP_H

#include <stddef.h> /* space.h uses NULL */
#include <stdint.h>

#include "space.h"

/* Create a space of `size` bytes (page-aligned base). NULL on failure. */
struct shmobj__space *space_heap_create(uint64_t size);
void space_heap_destroy(struct shmobj__space *sp);
/* Live blocks now (allocated through the space and not freed). */
uint64_t space_heap_live(struct shmobj__space *sp);
/* Walk the arena: 0 when consistent. */
int space_heap_check(struct shmobj__space *sp);

#endif
