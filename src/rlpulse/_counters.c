/* The compiled writer of one worker's SharedCounters slots.
 *
 * rlpulse.sources.shared.WorkerCounters is the reference implementation, in
 * Python; this type gives its inc(), set() and heartbeat() the same
 * behaviour as one C call each, so that a worker's increment costs about as
 * much as a plain attribute increment. Everything that is not on that path
 * (the slot layout, the error messages, pickling) stays in Python: a failing
 * call asks the Python object for the exception to raise.
 *
 * Like the Python writer, it keeps a reference to the segment's float64 view
 * and holds no buffer export between calls: each write takes the view's
 * buffer for its duration only. Closing the segment releases the view, after
 * which taking its buffer fails and the write raises instead of touching
 * memory, and nothing a writer holds can keep the mapping from closing.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    PyObject *view;      /* the segment's float64 memoryview; NULL until bound */
    PyObject *counters;  /* dict: counter name -> slot index */
    PyObject *gauges;    /* dict: gauge name -> slot index */
    Py_ssize_t heartbeat;
    PyObject *clock;     /* the monotonic clock heartbeats are stamped with */
} Writer;

/* Take the view's buffer for one access to slot index: the slot's address,
 * or NULL (no error set) once the view is released, when nothing may be
 * touched. The bound is checked against the buffer just taken. */
static double *
writer_open(Writer *self, Py_buffer *buffer, Py_ssize_t index)
{
    if (self->view == NULL) {
        return NULL;
    }
    if (PyObject_GetBuffer(self->view, buffer, PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        return NULL;
    }
    if (index < 0 || index >= buffer->len / (Py_ssize_t)sizeof(double)) {
        PyBuffer_Release(buffer);
        return NULL;
    }
    return (double *)buffer->buf + index;
}

/* Whether the error set is one of the Python writer's "bad call" errors:
 * TypeError or ValueError, and OverflowError when converting a value the
 * way a float64 memoryview does. Any other error propagates unchanged. */
static int
writer_bad_call(int conversion)
{
    return PyErr_ExceptionMatches(PyExc_TypeError) ||
           PyErr_ExceptionMatches(PyExc_ValueError) ||
           (conversion && PyErr_ExceptionMatches(PyExc_OverflowError));
}

/* Raise the exception the Python side builds: self.<method>(*args). */
static PyObject *
writer_raise(Writer *self, const char *method, const char *format, ...)
{
    va_list arguments;
    PyObject *callable = PyObject_GetAttrString((PyObject *)self, method);
    if (callable == NULL) {
        return NULL;
    }
    va_start(arguments, format);
    PyObject *call_args = Py_VaBuildValue(format, arguments);
    va_end(arguments);
    if (call_args == NULL) {
        Py_DECREF(callable);
        return NULL;
    }
    PyObject *error = PyObject_Call(callable, call_args, NULL);
    Py_DECREF(callable);
    Py_DECREF(call_args);
    if (error == NULL) {
        return NULL;
    }
    if (PyExceptionInstance_Check(error)) {
        PyErr_SetObject((PyObject *)Py_TYPE(error), error);
    }
    else {
        PyErr_Format(PyExc_SystemError, "%s() returned %R, not an exception",
                     method, error);
    }
    Py_DECREF(error);
    return NULL;
}

/* Raise self._failure(method, key, value); a missing n is inc()'s default. */
static PyObject *
writer_fail(Writer *self, const char *method, PyObject *key, PyObject *value)
{
    if (value == NULL) {
        return writer_raise(self, "_failure", "(sOd)", method, key, 1.0);
    }
    return writer_raise(self, "_failure", "(sOO)", method, key, value);
}

/* Parse (key, value) from a vectorcall, value optional when has_default. */
static int
writer_arguments(const char *method, const char *value_name,
                 PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                 PyObject **key, PyObject **value, int has_default)
{
    Py_ssize_t required = has_default ? 1 : 2;
    *key = nargs > 0 ? args[0] : NULL;
    *value = nargs > 1 ? args[1] : NULL;
    if (nargs > 2) {
        PyErr_Format(PyExc_TypeError,
                     "WorkerCounters.%s() takes at most 2 arguments (%zd given)", method, nargs);
        return -1;
    }
    if (kwnames != NULL) {
        Py_ssize_t count = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t i = 0; i < count; i++) {
            PyObject *name = PyTuple_GET_ITEM(kwnames, i);
            PyObject **slot;
            if (PyUnicode_CompareWithASCIIString(name, "key") == 0) {
                slot = key;
            }
            else if (PyUnicode_CompareWithASCIIString(name, value_name) == 0) {
                slot = value;
            }
            else {
                PyErr_Format(PyExc_TypeError,
                             "WorkerCounters.%s() got an unexpected keyword argument %R",
                             method, name);
                return -1;
            }
            if (*slot != NULL) {
                PyErr_Format(PyExc_TypeError,
                             "WorkerCounters.%s() got multiple values for argument %R",
                             method, name);
                return -1;
            }
            *slot = args[nargs + i];
        }
    }
    if (*key == NULL || (required == 2 && *value == NULL)) {
        PyErr_Format(PyExc_TypeError, "WorkerCounters.%s() missing required argument '%s'",
                     method, *key == NULL ? "key" : value_name);
        return -1;
    }
    return 0;
}

/* The slot of key in names, or -1 with the Python side's exception set;
 * value is the call's value (NULL for inc()'s default), for the message. */
static Py_ssize_t
writer_slot(Writer *self, PyObject *names, PyObject *key, const char *method,
            const char *kind, PyObject *value)
{
    PyObject *slot = PyDict_GetItemWithError(names, key);
    if (slot == NULL) {
        if (PyErr_Occurred()) {
            /* An unhashable key is refused like a bad value, as in Python. */
            if (writer_bad_call(0)) {
                PyErr_Clear();
                writer_fail(self, method, key, value);
            }
        }
        else {
            writer_raise(self, "_unknown", "(Os)", key, kind);
        }
        return -1;
    }
    Py_ssize_t index = PyLong_AsSsize_t(slot);
    if (index == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (index < 0) {
        PyErr_Format(PyExc_SystemError, "slot %zd outside the segment", index);
        return -1;
    }
    return index;
}

/* Add number to slot index (add) or store it there; the call's method, key
 * and value name it in the error if the view is released. */
static PyObject *
writer_write(Writer *self, Py_ssize_t index, double number, int add,
             const char *method, PyObject *key, PyObject *value)
{
    Py_buffer buffer;
    double *slot = writer_open(self, &buffer, index);
    if (slot == NULL) {
        return writer_fail(self, method, key, value);
    }
    if (add) {
        *slot += number;
    }
    else {
        *slot = number;
    }
    PyBuffer_Release(&buffer);
    Py_RETURN_NONE;
}

/* Convert a value to float64 as a float64 memoryview stores it; -1 with an
 * error set on failure (the Python writer's errors raised through _failure). */
static int
writer_convert(Writer *self, const char *method, PyObject *key, PyObject *value,
               double *number)
{
    *number = PyFloat_AsDouble(value);
    if (*number == -1.0 && PyErr_Occurred()) {
        if (writer_bad_call(1)) {
            PyErr_Clear();
            writer_fail(self, method, key, value);
        }
        return -1;
    }
    return 0;
}

/* inc() of a value that is not an exact float or int: the slot's float plus
 * the value, through the value's own arithmetic, as the Python writer does. */
static PyObject *
writer_inc_object(Writer *self, Py_ssize_t index, PyObject *key, PyObject *value)
{
    Py_buffer buffer;
    double *slot = writer_open(self, &buffer, index);
    if (slot == NULL) {
        return writer_fail(self, "inc", key, value);
    }
    PyObject *current = PyFloat_FromDouble(*slot);
    PyBuffer_Release(&buffer);
    if (current == NULL) {
        return NULL;
    }
    PyObject *total = PyNumber_Add(current, value);
    Py_DECREF(current);
    if (total == NULL) {
        if (writer_bad_call(0)) {
            PyErr_Clear();
            writer_fail(self, "inc", key, value);
        }
        return NULL;
    }
    double number;
    int converted = writer_convert(self, "inc", key, total, &number);
    Py_DECREF(total);
    if (converted < 0) {
        return NULL;
    }
    /* The value's arithmetic ran Python code: the buffer is taken again. */
    return writer_write(self, index, number, 0, "inc", key, value);
}

static PyObject *
writer_inc(Writer *self, PyObject *const *args, Py_ssize_t nargs,
           PyObject *kwnames)
{
    PyObject *key, *value;
    if (writer_arguments("inc", "n", args, nargs, kwnames, &key, &value, 1) < 0) {
        return NULL;
    }
    Py_ssize_t index = writer_slot(self, self->counters, key, "inc", "counter",
                                   value);
    if (index < 0) {
        return NULL;
    }
    double n = 1.0;
    if (value != NULL) {
        if (!PyFloat_CheckExact(value) && !PyLong_CheckExact(value)) {
            return writer_inc_object(self, index, key, value);
        }
        /* float + float or float + int: an int too large for a float
         * raises OverflowError, which propagates, as in Python. */
        n = PyFloat_AsDouble(value);
        if (n == -1.0 && PyErr_Occurred()) {
            return NULL;
        }
    }
    return writer_write(self, index, n, 1, "inc", key, value);
}

static PyObject *
writer_set(Writer *self, PyObject *const *args, Py_ssize_t nargs,
           PyObject *kwnames)
{
    PyObject *key, *value;
    if (writer_arguments("set", "value", args, nargs, kwnames, &key, &value, 0) < 0) {
        return NULL;
    }
    Py_ssize_t index = writer_slot(self, self->gauges, key, "set", "gauge", value);
    if (index < 0) {
        return NULL;
    }
    double number;
    if (writer_convert(self, "set", key, value, &number) < 0) {
        return NULL;
    }
    return writer_write(self, index, number, 0, "set", key, value);
}

static PyObject *
writer_heartbeat(Writer *self, PyObject *Py_UNUSED(ignored))
{
    if (self->clock == NULL) {
        return writer_fail(self, "heartbeat", Py_None, Py_None);
    }
    PyObject *now = PyObject_CallNoArgs(self->clock);
    if (now == NULL) {
        return NULL;
    }
    double stamp = PyFloat_AsDouble(now);
    Py_DECREF(now);
    if (stamp == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    return writer_write(self, self->heartbeat, stamp, 0, "heartbeat", Py_None,
                        Py_None);
}

static PyObject *
writer_bind(Writer *self, PyObject *args)
{
    PyObject *view, *counters, *gauges, *clock;
    Py_ssize_t heartbeat;
    if (self->view != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_bind(): this writer is already bound");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OO!O!nO:_bind", &view, &PyDict_Type, &counters,
                          &PyDict_Type, &gauges, &heartbeat, &clock)) {
        return NULL;
    }
    if (!PyCallable_Check(clock)) {
        PyErr_SetString(PyExc_TypeError, "_bind(): clock must be callable");
        return NULL;
    }
    Py_buffer buffer;
    if (PyObject_GetBuffer(view, &buffer,
                           PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        return NULL;
    }
    if (buffer.itemsize != (Py_ssize_t)sizeof(double) || buffer.format == NULL ||
            strcmp(buffer.format, "d") != 0) {
        PyBuffer_Release(&buffer);
        PyErr_SetString(PyExc_TypeError, "_bind(): the view must hold float64 ('d')");
        return NULL;
    }
    /* Slots are checked against the view at each write. */
    PyBuffer_Release(&buffer);
    Py_INCREF(view);
    Py_XSETREF(self->view, view);
    self->heartbeat = heartbeat;
    Py_INCREF(counters);
    Py_XSETREF(self->counters, counters);
    Py_INCREF(gauges);
    Py_XSETREF(self->gauges, gauges);
    Py_INCREF(clock);
    Py_XSETREF(self->clock, clock);
    Py_RETURN_NONE;
}

static PyObject *
writer_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    Writer *self = (Writer *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->counters = PyDict_New();
    self->gauges = PyDict_New();
    if (self->counters == NULL || self->gauges == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

/* The view and the clock may take part in a reference cycle; the maps hold
 * only the names and slot numbers _bind was given. */
static int
writer_traverse(Writer *self, visitproc visit, void *arg)
{
    Py_VISIT(self->view);
    Py_VISIT(self->clock);
    return 0;
}

/* A cleared writer has no view and no clock: every write raises. */
static int
writer_clear(Writer *self)
{
    Py_CLEAR(self->view);
    Py_CLEAR(self->clock);
    return 0;
}

static void
writer_dealloc(Writer *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->view);
    Py_CLEAR(self->counters);
    Py_CLEAR(self->gauges);
    Py_CLEAR(self->clock);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef writer_methods[] = {
    {"inc", (PyCFunction)(void (*)(void))writer_inc, METH_FASTCALL | METH_KEYWORDS,
     "inc(key, n=1.0)\n--\n\nAdd n to this worker's counter key."},
    {"set", (PyCFunction)(void (*)(void))writer_set, METH_FASTCALL | METH_KEYWORDS,
     "set(key, value)\n--\n\nSet this worker's gauge key to value."},
    {"heartbeat", (PyCFunction)writer_heartbeat, METH_NOARGS,
     "heartbeat()\n--\n\nStamp this worker's heartbeat with the current time."},
    {"_bind", (PyCFunction)writer_bind, METH_VARARGS,
     "_bind(view, counters, gauges, heartbeat, clock)\n--\n\n"
     "Write into view: counters and gauges map names to slots."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject WriterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rlpulse._counters.Writer",
    .tp_doc = "Compiled inc(), set() and heartbeat() of a worker's slots.",
    .tp_basicsize = sizeof(Writer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)writer_traverse,
    .tp_clear = (inquiry)writer_clear,
    .tp_new = writer_new,
    .tp_dealloc = (destructor)writer_dealloc,
    .tp_methods = writer_methods,
};

static struct PyModuleDef counters_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "rlpulse._counters",
    .m_doc = "The compiled writer of SharedCounters slots.",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__counters(void)
{
    if (PyType_Ready(&WriterType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&counters_module);
    if (module == NULL) {
        return NULL;
    }
    Py_INCREF(&WriterType);
    if (PyModule_AddObject(module, "Writer", (PyObject *)&WriterType) < 0) {
        Py_DECREF(&WriterType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
