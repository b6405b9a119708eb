#include "bindings.h"

PyMethodDef ow_pool_methods[] = {
    {NULL, NULL, 0, NULL},
};
