/* test_asgi_done.c - check suite for worker/python/asgi_done.c, the
 * awaitable that is already complete.
 *
 * The objects are made in C and handed to small Python snippets (module
 * "t", HELPERS below) that await them, iterate them and call their
 * methods the way coroutines and asyncio do; reference counts are read in
 * C around each use. Python starts once per process, so every test runs
 * forked and starts it in its fixture.
 */
#include "config.h"

#include <check.h>

#include "tests/unit/py_harness.h"
#include "worker/python/asgi_done.h"

static const char HELPERS[] =
    "import asyncio, inspect\n"
    "\n"
    "async def await_it(d):\n"
    "    return await d\n"
    "\n"
    "def first_step(d):\n"
    /* one step of a coroutine awaiting D: ('returned', value) when it
     * went through without yielding, ('yielded', what) when it stopped */
    "    c = await_it(d)\n"
    "    try:\n"
    "        what = c.send(None)\n"
    "    except StopIteration as e:\n"
    "        return ('returned', e.value)\n"
    "    c.close()\n"
    "    return ('yielded', what)\n"
    "\n"
    "async def in_a_task(d):\n"
    /* under a running loop: did the loop run between await and return? */
    "    ran = []\n"
    "    asyncio.get_running_loop().call_soon(ran.append, 1)\n"
    "    value = await d\n"
    "    return value, bool(ran)\n"
    "\n"
    "def on_a_loop(d):\n"
    "    loop = asyncio.new_event_loop()\n"
    "    try:\n"
    "        return loop.run_until_complete(loop.create_task(in_a_task(d)))\n"
    "    finally:\n"
    "        loop.close()\n"
    "\n"
    "def stop_value(f, *args):\n"
    /* what F(*ARGS) raised: ('StopIteration', e.value) or its repr */
    "    try:\n"
    "        r = f(*args)\n"
    "    except StopIteration as e:\n"
    "        return ('StopIteration', e.value)\n"
    "    except BaseException as e:\n"
    "        return ('raised', e)\n"
    "    return ('returned', r)\n";

static sl_options_t opt;
static PyObject *module; /* borrowed: t */

static void setup(void)
{
    hp_log_to_file();
    h_options(&opt, NULL);
    ck_assert_int_eq(sl_py_init(&opt), 0);
    hp_module("t", HELPERS);
    module = PyImport_AddModule("t");
    ck_assert_ptr_nonnull(module);
    ck_assert_int_eq(sl_asgi_done_init(), 0);
}

/* Bind NAME in t to O (a new reference of t's; O's own is kept). */
static void set_attr(const char *name, PyObject *o)
{
    ck_assert_int_eq(PyObject_SetAttrString(module, name, o), 0);
}

static void del_attr(const char *name)
{
    ck_assert_int_eq(PyObject_DelAttrString(module, name), 0);
}

/* A fresh object only the caller refers to: its count is exact. */
static PyObject *fresh(void)
{
    PyObject *o = Py_BuildValue("[s]", "payload");

    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(Py_REFCNT(o), 1);
    return o;
}

/* ------------------------------------------------------------------ */
/* await                                                              */

/* A coroutine awaiting it goes straight through: its first step returns
 * the value, it never yields. */
START_TEST(test_await_returns_at_once)
{
    PyObject *d = sl_asgi_done_new(PyUnicode_FromString("ready"));

    ck_assert_ptr_nonnull(d);
    set_attr("d", d);
    ck_assert_str_eq(hp_eval("t", "first_step(d)"), "('returned', 'ready')");
    ck_assert_str_eq(hp_eval("t", "inspect.isawaitable(d)"), "True");
    /* awaitable again, with the same answer */
    ck_assert_str_eq(hp_eval("t", "first_step(d)"), "('returned', 'ready')");
    Py_DECREF(d);
}
END_TEST

/* In a Task on a running loop: the await gives the loop no turn. */
START_TEST(test_await_gives_the_loop_no_turn)
{
    PyObject *d = sl_asgi_done_new(PyLong_FromLong(42));

    ck_assert_ptr_nonnull(d);
    set_attr("d", d);
    ck_assert_str_eq(hp_eval("t", "on_a_loop(d)"), "(42, False)");
    /* the check can tell: a real wait does give it one */
    ck_assert_str_eq(hp_eval("t", "on_a_loop(asyncio.sleep(0, 7))"),
                     "(7, True)");
    Py_DECREF(d);
}
END_TEST

/* The await protocol from C, as a coroutine's YIELD_FROM drives it:
 * am_send answers PYGEN_RETURN with a new reference to the value. */
START_TEST(test_am_send_from_c)
{
    PyObject *v = fresh(), *d, *it, *res = NULL;

    Py_INCREF(v); /* one for us, one for d to steal */
    d = sl_asgi_done_new(v);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(Py_REFCNT(v), 2);
    it = Py_TYPE(d)->tp_as_async->am_await(d);
    ck_assert_ptr_nonnull(it);
    ck_assert_int_eq(PyIter_Send(it, Py_None, &res), PYGEN_RETURN);
    ck_assert_ptr_eq(res, v);
    ck_assert_int_eq(Py_REFCNT(v), 3);
    Py_DECREF(res);
    /* what is sent in is ignored */
    ck_assert_int_eq(PyIter_Send(it, Py_True, &res), PYGEN_RETURN);
    ck_assert_ptr_eq(res, v);
    Py_DECREF(res);
    ck_assert(!PyErr_Occurred());
    Py_DECREF(it);
    Py_DECREF(d);
    ck_assert_int_eq(Py_REFCNT(v), 1); /* d gave its reference back */
    Py_DECREF(v);
}
END_TEST

/* ------------------------------------------------------------------ */
/* the generator interface                                            */

/* next() and send() end the iteration at once with the value, whatever
 * is sent; a tuple comes back whole, not as StopIteration's args. */
START_TEST(test_next_and_send_stop_with_the_value)
{
    PyObject *d = sl_asgi_done_new(Py_BuildValue("(ii)", 1, 2));

    ck_assert_ptr_nonnull(d);
    set_attr("d", d);
    ck_assert_str_eq(hp_eval("t", "stop_value(next, iter(d))"),
                     "('StopIteration', (1, 2))");
    ck_assert_str_eq(hp_eval("t", "stop_value(d.send, None)"),
                     "('StopIteration', (1, 2))");
    ck_assert_str_eq(hp_eval("t", "stop_value(d.send, 'ignored')"),
                     "('StopIteration', (1, 2))");
    ck_assert_str_eq(hp_eval("t", "iter(d) is d"), "True");
    Py_DECREF(d);
}
END_TEST

START_TEST(test_none_value)
{
    PyObject *d = sl_asgi_done_none();

    set_attr("d", d);
    ck_assert_str_eq(hp_eval("t", "stop_value(next, d)"),
                     "('StopIteration', None)");
    ck_assert_str_eq(hp_eval("t", "stop_value(d.send, 1)"),
                     "('StopIteration', None)");
    ck_assert_str_eq(hp_eval("t", "first_step(d)"), "('returned', None)");
    ck_assert_str_eq(hp_eval("t", "list(d)"), "[]");
    Py_DECREF(d);
}
END_TEST

/* throw() raises what it is given, as a finished generator does: an
 * instance as itself, a type with or without a value. */
START_TEST(test_throw_raises_what_it_is_given)
{
    PyObject *d = sl_asgi_done_new(PyLong_FromLong(1));

    ck_assert_ptr_nonnull(d);
    set_attr("d", d);
    hp_module("t", "boom = ValueError('boom')\n");
    ck_assert_str_eq(hp_eval("t", "stop_value(d.throw, boom)[1] is boom"),
                     "True");
    ck_assert_str_eq(hp_eval("t", "repr(stop_value(d.throw, KeyError)[1])"),
                     "KeyError()");
    ck_assert_str_eq(
        hp_eval("t", "repr(stop_value(d.throw, KeyError, 'k')[1])"),
        "KeyError('k')");
    ck_assert_str_eq(hp_eval("t", "type(stop_value(d.throw)[1]).__name__"),
                     "TypeError");
    /* how a Task cancels what its coroutine awaits */
    ck_assert_str_eq(
        hp_eval("t", "type(stop_value(d.throw, asyncio.CancelledError)[1])"
                     ".__name__"),
        "CancelledError");
    Py_DECREF(d);
}
END_TEST

/* throw() of what is no exception is a TypeError, as for a generator;
 * so is a separate value with an instance. */
START_TEST(test_throw_rejects_what_is_not_an_exception)
{
    PyObject *d = sl_asgi_done_new(PyLong_FromLong(1));

    ck_assert_ptr_nonnull(d);
    set_attr("d", d);
    ck_assert_str_eq(hp_eval("t", "repr(stop_value(d.throw, 42))"),
                     "('raised', TypeError('exceptions must be classes or "
                     "instances deriving from BaseException, not int'))");
    ck_assert_str_eq(
        hp_eval("t", "repr(stop_value(d.throw, ValueError('x'), 'y'))"),
        "('raised', TypeError('instance exception may not have a separate "
        "value'))");
    /* None as the value is no value */
    ck_assert_str_eq(
        hp_eval("t", "repr(stop_value(d.throw, ValueError('x'), None))"),
        "('raised', ValueError('x'))");
    /* a generator says the same */
    hp_module("t", "def gen():\n"
                   "    yield\n"
                   "g = gen()\n"
                   "next(g)\n");
    ck_assert_str_eq(hp_eval("t", "repr(stop_value(g.throw, 42))"),
                     "('raised', TypeError('exceptions must be classes or "
                     "instances deriving from BaseException, not int'))");
    Py_DECREF(d);
}
END_TEST

START_TEST(test_raise_from_c)
{
    PyObject *exc = PyObject_CallFunction(PyExc_OSError, "is", 2, "gone");
    PyObject *args[2] = {PyExc_KeyError, NULL}, *t, *val, *tb;

    ck_assert_ptr_nonnull(exc);
    ck_assert_ptr_null(sl_asgi_done_raise(&exc, 1));
    PyErr_Fetch(&t, &val, &tb);
    ck_assert_ptr_eq(t, (PyObject *)Py_TYPE(exc));
    ck_assert_ptr_eq(val, exc);
    Py_XDECREF(t);
    Py_XDECREF(val);
    Py_XDECREF(tb);

    args[1] = PyUnicode_FromString("key");
    ck_assert_ptr_null(sl_asgi_done_raise(args, 2));
    ck_assert(PyErr_ExceptionMatches(PyExc_KeyError));
    PyErr_Clear();
    ck_assert_ptr_null(sl_asgi_done_raise(args, 0));
    ck_assert(PyErr_ExceptionMatches(PyExc_TypeError));
    PyErr_Clear();
    Py_DECREF(args[1]);
    Py_DECREF(exc);
}
END_TEST

/* close() is a no-op that answers None, and the value is still there. */
START_TEST(test_close)
{
    PyObject *d = sl_asgi_done_new(PyUnicode_FromString("kept"));

    ck_assert_ptr_nonnull(d);
    set_attr("d", d);
    ck_assert_str_eq(hp_eval("t", "d.close()"), "None");
    ck_assert_str_eq(hp_eval("t", "first_step(d)"), "('returned', 'kept')");
    Py_DECREF(d);
}
END_TEST

/* ------------------------------------------------------------------ */
/* references                                                         */

/* new() steals the value; awaiting it from Python any number of times
 * and dropping it leaves the value's count where it began. */
START_TEST(test_value_refcount_balanced)
{
    PyObject *v = fresh(), *d;

    d = sl_asgi_done_new(Py_NewRef(v));
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(Py_REFCNT(v), 2);
    ck_assert_int_eq(Py_REFCNT(d), 1);
    set_attr("d", d);
    for (int i = 0; i < 3; i++) {
        hp_eval("t", "first_step(d)");
        hp_eval("t", "stop_value(next, d)");
        hp_eval("t", "stop_value(d.send, 0)");
        hp_eval("t", "stop_value(d.throw, ValueError)");
        hp_eval("t", "d.close()");
    }
    del_attr("d");
    PyGC_Collect(); /* nothing of the snippets' may still hold it */
    ck_assert_int_eq(Py_REFCNT(d), 1);
    ck_assert_int_eq(Py_REFCNT(v), 2);
    Py_DECREF(d);
    ck_assert_int_eq(Py_REFCNT(v), 1);
    Py_DECREF(v);
}
END_TEST

/* The awaitable of None is one shared object: none() and new(None) hand
 * out references to it, and take None's reference with them. */
START_TEST(test_none_is_shared)
{
    PyObject *a = sl_asgi_done_none(), *b;
    Py_ssize_t shared = Py_REFCNT(a), nones = Py_REFCNT(Py_None);

    b = sl_asgi_done_new(Py_NewRef(Py_None));
    ck_assert_ptr_eq(a, b);
    ck_assert_int_eq(Py_REFCNT(a), shared + 1);
    ck_assert_int_eq(Py_REFCNT(Py_None), nones); /* stolen and released */
    Py_DECREF(b);
    ck_assert_int_eq(Py_REFCNT(a), shared);
    b = sl_asgi_done_none();
    ck_assert_ptr_eq(a, b);
    Py_DECREF(b);
    ck_assert_int_eq(Py_REFCNT(a), shared);
    Py_DECREF(a);
}
END_TEST

/* NULL in, NULL out: new() takes a failed call's result as it is. */
START_TEST(test_null_passes_through)
{
    PyErr_SetString(PyExc_MemoryError, "from the caller");
    ck_assert_ptr_null(sl_asgi_done_new(NULL));
    ck_assert(PyErr_ExceptionMatches(PyExc_MemoryError));
    PyErr_Clear();
}
END_TEST

static Suite *asgi_done_suite(void)
{
    Suite *s = suite_create("asgi_done");
    TCase *tc = tcase_create("asgi_done");

    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_await_returns_at_once);
    tcase_add_test(tc, test_await_gives_the_loop_no_turn);
    tcase_add_test(tc, test_am_send_from_c);
    tcase_add_test(tc, test_next_and_send_stop_with_the_value);
    tcase_add_test(tc, test_none_value);
    tcase_add_test(tc, test_throw_raises_what_it_is_given);
    tcase_add_test(tc, test_throw_rejects_what_is_not_an_exception);
    tcase_add_test(tc, test_raise_from_c);
    tcase_add_test(tc, test_close);
    tcase_add_test(tc, test_value_refcount_balanced);
    tcase_add_test(tc, test_none_is_shared);
    tcase_add_test(tc, test_null_passes_through);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(asgi_done_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
