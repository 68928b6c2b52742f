// The same consumer as consumer.c, compiled as C++: the installed headers
// must be extern "C"-clean and warning-free in both languages.
#include "consumer.c"
