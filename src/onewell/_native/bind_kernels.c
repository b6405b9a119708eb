#include "bindings.h"

PyMethodDef ow_kernel_methods[] = {
    {NULL, NULL, 0, NULL},
};
