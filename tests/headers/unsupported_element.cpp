// Must not compile: an array of a struct (tests/headers/CMakeLists.txt,
// test headers.unsupported_element_type checks that the error names the
// struct and says what is supported).
#include <cairn/cairn.hpp>

struct Particle {
    double x[3];
    int id;
};

int main()
{
    Particle p[4]{};
    cairn::StateDict sd;
    sd.add_array("p", p, {4}, cairn::Box{{0}, {4}});
}
