/* sfsro-format's private helpers, shared by its own files only. */
#ifndef CFS_SFSRO_INTERNAL_H
#define CFS_SFSRO_INTERNAL_H

#include "sfsro-format/sfsro.h"


#endif
