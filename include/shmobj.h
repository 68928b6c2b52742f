/**
 * @file shmobj.h
 * @brief libshmobj: typed objects, message queues and hash tables in shared
 *        memory. Include this one header.
 */
#ifndef SHMOBJ_H
#define SHMOBJ_H

#include "shmobj/error.h"
#include "shmobj/version.h"
#include "shmobj/types.h"
#include "shmobj/arena.h"
#include "shmobj/segment.h"
#include "shmobj/object.h"
#include "shmobj/map.h"
#include "shmobj/queue.h"
#include "shmobj/topic.h"
#include "shmobj/table.h"
#include "shmobj/service.h"
#include "shmobj/watch.h"
#include "shmobj/waitset.h"

#endif /* SHMOBJ_H */
