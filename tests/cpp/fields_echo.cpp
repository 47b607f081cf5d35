// Test program for driver.h: reads a fields file and a table written by
// pimforge.sim.drivers.io and writes back what it read as named stats.
// Usage: fields_echo FIELDS TABLE STATS [KEY]: KEY, when given, is read as an
// integer after the stats are written (a missing key ends the program).
#include <string>
#include <vector>

#include "driver.h"
#include "pimforge_params.h"

int main(int argc, char** argv) {
    if (argc < 4) return 2;
    const pf::Fields f(argv[1]);
    {
        pf::Stats st(argv[3]);
        st.put("x", f.real("x"));
        st.put("n", f.integer("n"));
        st.put("absent", f.integer("absent", 7));
        st.put("name_length", (long long)f.str("name").size());
        pf::Table t(argv[2]);
        const size_t b = t.col("b");
        std::vector<long long> row, col_b;
        while (t.next(row)) col_b.push_back(row[b]);
        st.put("col_b", col_b);
        VlWide<3> w{};
        pf::lset(w, 2, 0xdeadbeefu);
        uint64_t q = 0;
        pf::lset(q, 1, 5u);
        st.put("lanes", std::vector<uint64_t>{pf::lget(w, 2), q, pf::lget64(q, 0, 2)});
        st.put("scale", SCALE);
        st.put("counts", std::vector<int>(COUNTS, COUNTS + 3));
        st.put("flag", (long long)FLAG);
    }
    if (argc > 4) f.integer(argv[4]);
    return 0;
}
