/* The one hook of SHMOBJ__STEP() (step.h): NULL unless a test set it. */
#include "step.h"

shmobj__step_fn shmobj__step_hook;
