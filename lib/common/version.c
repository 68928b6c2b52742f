/* Version queries: what the loaded library is, as opposed to the headers a
 * program was compiled with. */
#include "shmobj/version.h"

unsigned shmobj_version(void) { return SHMOBJ_VERSION_NUMBER; }

const char *shmobj_version_string(void) { return SHMOBJ_VERSION_STRING; }

unsigned shmobj_format_version(void) { return SHMOBJ_FORMAT_VERSION; }
