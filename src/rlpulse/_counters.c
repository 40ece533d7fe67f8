/* The compiled writer of one worker's SharedCounters slots.
 *
 * rlpulse.sources.shared.WorkerCounters is the reference implementation, in
 * Python; this type gives its inc(), set() and heartbeat() the same
 * behaviour as one C call each, so that a worker's increment costs about as
 * much as a plain attribute increment. Everything that is not on that path
 * stays in Python: the slot layout (rlpulse.sources.shared._Layout, which
 * hands _bind the worker's slot indices; this file knows only that a slot
 * holds a C double, and checks the view it is given for that), the error
 * messages (a failing call asks the Python object for the exception to
 * raise) and pickling.
 *
 * Like the Python writer, it keeps a reference to the segment's float64 view
 * and holds no buffer export between calls: each write takes the view's
 * buffer for its duration only. Closing the segment releases the view, after
 * which taking its buffer fails and the write raises instead of touching
 * memory, and nothing a writer holds can keep the mapping from closing.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    PyObject *view;      /* the segment's float64 memoryview; NULL until bound */
    PyObject *counters;  /* dict: counter name -> slot index */
    PyObject *gauges;    /* dict: gauge name -> slot index */
    Py_ssize_t heartbeat;
    PyObject *clock;     /* the monotonic clock heartbeats are stamped with */
} Writer;

/* What inc() and set() differ in, apart from what they store. */
typedef struct {
    const char *method;      /* the method's name, for messages */
    const char *value_name;  /* its value argument's name */
    const char *kind;        /* the kind of key it writes: "counter", "gauge" */
    int has_default;         /* whether the value may be left out (inc's n) */
} WriterCall;

static const WriterCall INC_CALL = {"inc", "n", "counter", 1};
static const WriterCall SET_CALL = {"set", "value", "gauge", 0};

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

/* Parse (key, value) from a vectorcall; value is NULL when left out. */
static int
writer_arguments(const WriterCall *call, PyObject *const *args, Py_ssize_t nargs,
                 PyObject *kwnames, PyObject **key, PyObject **value)
{
    const char *method = call->method;
    const char *value_name = call->value_name;
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
    if (*key == NULL || (!call->has_default && *value == NULL)) {
        PyErr_Format(PyExc_TypeError, "WorkerCounters.%s() missing required argument '%s'",
                     method, *key == NULL ? "key" : value_name);
        return -1;
    }
    return 0;
}

/* Parse a call's (key, value) and look the key up in names: its slot, or
 * -1 with the exception set (the Python side's for an unknown or unhashable
 * key). value is NULL for inc()'s default. */
static Py_ssize_t
writer_target(Writer *self, const WriterCall *call, PyObject *names,
              PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
              PyObject **key, PyObject **value)
{
    if (writer_arguments(call, args, nargs, kwnames, key, value) < 0) {
        return -1;
    }
    PyObject *slot = PyDict_GetItemWithError(names, *key);
    if (slot == NULL) {
        if (PyErr_Occurred()) {
            /* An unhashable key is refused like a bad value, as in Python. */
            if (writer_bad_call(0)) {
                PyErr_Clear();
                writer_fail(self, call->method, *key, *value);
            }
        }
        else {
            writer_raise(self, "_unknown", "(Os)", *key, call->kind);
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
        double total = *slot + number;
        if (number < 0) {
            /* A counter only goes up: a fall would read as a restart. */
            PyBuffer_Release(&buffer);
            return writer_raise(self, "_negative", "(OO)", key,
                                value == NULL ? Py_None : value);
        }
        if (!isfinite(total)) {
            /* A NaN or infinite counter would stay so for good: refused. */
            PyBuffer_Release(&buffer);
            return writer_raise(self, "_nonfinite", "(OO)", key,
                                value == NULL ? Py_None : value);
        }
        *slot = total;
    }
    else {
        *slot = number;
    }
    PyBuffer_Release(&buffer);
    Py_RETURN_NONE;
}

/* Store number, converted to float64 as a float64 memoryview stores it, in
 * slot index. A failure raises the Python writer's error for the call's
 * method, key and value (number is value, or what inc() made of it). */
static PyObject *
writer_store(Writer *self, Py_ssize_t index, PyObject *number,
             const char *method, PyObject *key, PyObject *value)
{
    double converted = PyFloat_AsDouble(number);
    if (converted == -1.0 && PyErr_Occurred()) {
        if (writer_bad_call(1)) {
            PyErr_Clear();
            writer_fail(self, method, key, value);
        }
        return NULL;
    }
    if (strcmp(method, "inc") == 0 && !isfinite(converted)) {
        return writer_raise(self, "_nonfinite", "(OO)", key, value);
    }
    return writer_write(self, index, converted, 0, method, key, value);
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
    /* The value's arithmetic ran Python code: the buffer is taken again. */
    PyObject *zero = PyLong_FromLong(0);
    int negative = zero == NULL ? -1 : PyObject_RichCompareBool(value, zero, Py_LT);
    Py_XDECREF(zero);
    if (negative != 0) {
        Py_DECREF(total);
        if (negative < 0) {
            if (writer_bad_call(0)) {
                PyErr_Clear();
                writer_fail(self, "inc", key, value);
            }
            return NULL;
        }
        return writer_raise(self, "_negative", "(OO)", key, value);
    }
    PyObject *stored = writer_store(self, index, total, "inc", key, value);
    Py_DECREF(total);
    return stored;
}

static PyObject *
writer_inc(Writer *self, PyObject *const *args, Py_ssize_t nargs,
           PyObject *kwnames)
{
    PyObject *key, *value;
    Py_ssize_t index = writer_target(self, &INC_CALL, self->counters, args, nargs,
                                     kwnames, &key, &value);
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
    Py_ssize_t index = writer_target(self, &SET_CALL, self->gauges, args, nargs,
                                     kwnames, &key, &value);
    if (index < 0) {
        return NULL;
    }
    return writer_store(self, index, value, "set", key, value);
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

/* slots.<name>, which must be a dict (a new reference), or NULL. */
static PyObject *
writer_slot_map(PyObject *slots, const char *name)
{
    PyObject *map = PyObject_GetAttrString(slots, name);
    if (map != NULL && !PyDict_Check(map)) {
        PyErr_Format(PyExc_TypeError, "_bind(): slots.%s must be a dict, not %s",
                     name, Py_TYPE(map)->tp_name);
        Py_CLEAR(map);
    }
    return map;
}

/* Read one worker's slots (a _WorkerSlots of the layout) into the writer. */
static int
writer_take_slots(Writer *self, PyObject *slots)
{
    PyObject *counters = writer_slot_map(slots, "counters");
    if (counters == NULL) {
        return -1;
    }
    PyObject *gauges = writer_slot_map(slots, "gauges");
    if (gauges == NULL) {
        Py_DECREF(counters);
        return -1;
    }
    PyObject *heartbeat = PyObject_GetAttrString(slots, "heartbeat");
    Py_ssize_t index = heartbeat == NULL ? -1 : PyLong_AsSsize_t(heartbeat);
    Py_XDECREF(heartbeat);
    if (index == -1 && PyErr_Occurred()) {
        Py_DECREF(counters);
        Py_DECREF(gauges);
        return -1;
    }
    self->heartbeat = index;
    Py_XSETREF(self->counters, counters);
    Py_XSETREF(self->gauges, gauges);
    return 0;
}

static PyObject *
writer_bind(Writer *self, PyObject *args)
{
    PyObject *view, *slots, *clock;
    if (self->view != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_bind(): this writer is already bound");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OOO:_bind", &view, &slots, &clock)) {
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
    if (writer_take_slots(self, slots) < 0) {
        return NULL;
    }
    Py_INCREF(view);
    Py_XSETREF(self->view, view);
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
     "_bind(view, slots, clock)\n--\n\n"
     "Write into view, at one worker's slots of the segment's layout."},
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
