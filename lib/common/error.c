/* Status code names and messages, generated from SHMOBJ_ERRNO_MAP so the enum
 * and its text cannot drift. */
#include "shmobj/error.h"

const char *shmobj_strerror(int status)
{
    switch (status) {
    case 0:
        return "success";
#define SHMOBJ__ERR_MSG(name, value, msg)                                      \
    case value:                                                                \
        return msg;
        SHMOBJ_ERRNO_MAP(SHMOBJ__ERR_MSG)
#undef SHMOBJ__ERR_MSG
    default:
        return "unknown error";
    }
}

const char *shmobj_errname(int status)
{
    switch (status) {
    case 0:
        return "SHMOBJ_OK";
#define SHMOBJ__ERR_NAME(name, value, msg)                                     \
    case value:                                                                \
        return "SHMOBJ_" #name;
        SHMOBJ_ERRNO_MAP(SHMOBJ__ERR_NAME)
#undef SHMOBJ__ERR_NAME
    default:
        return "SHMOBJ_E?";
    }
}
