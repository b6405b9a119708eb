#include "bindings.h"

PyMethodDef ow_executor_methods[] = {
    {NULL, NULL, 0, NULL},
};
