/* The shared conformance scenarios (tests/conformance/scenarios.txt, format in its README.md),
 * run against the test redis-server through the C ABI. Every language runs the same file; the
 * steps are in conformance_steps.c (see conformance.h for the parts). */
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

static void every_scenario_reaches_its_verdicts(void) {
    scenario_list list = {0};
    char why[WHY];
    if (!conf_parse_file(CONFORMANCE_SCENARIOS, &list, why, sizeof why)) {
        check_failed(__FILE__, __LINE__, "parse " CONFORMANCE_SCENARIOS, why);
        conf_free_scenarios(&list);
        return;
    }
    CHECK(list.count >= 10); /* the scenario file was read */
    int failures = 0;
    for (size_t n = 0; n < list.count; n++) {
        const scenario *sc = &list.items[n];
        run *r = calloc(1, sizeof *r);
        if (!r) {
            check_failed(__FILE__, __LINE__, "calloc", "out of memory");
            break;
        }
        bool ok = start_run(r, sc, n, why, sizeof why);
        /* A `clients` directive was applied by start_run. */
        size_t first = sc->nsteps > 0 && strcmp(sc->steps[0].verb, "clients") == 0 ? 1 : 0;
        for (size_t i = first; ok && i < sc->nsteps; i++) {
            char step_why[WHY - 64];
            if (!run_step(r, &sc->steps[i], step_why, sizeof step_why)) {
                snprintf(why, sizeof why, "line %d: %s", sc->steps[i].line, step_why);
                ok = false;
            }
        }
        end_run(r);
        free(r);
        if (ok) {
            printf("ok   %s\n", sc->title);
        } else {
            printf("FAIL %s: %s\n", sc->title, why);
            failures++;
        }
        fflush(stdout);
    }
    if (failures > 0) {
        char detail[64];
        snprintf(detail, sizeof detail, "%d of %zu scenarios failed", failures, list.count);
        check_failed(__FILE__, __LINE__, "every scenario reaches its verdicts", detail);
    }
    conf_free_scenarios(&list);
}

const test_case conformance_tests[] = {
    {"conformance: every scenario reaches its verdicts", every_scenario_reaches_its_verdicts},
    {NULL, NULL},
};
