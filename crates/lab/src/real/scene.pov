// A small scene: reflective and textured spheres over a checkered plane, two lights,
// antialiasing: bounding hierarchy, intersection tests and shading.
#version 3.7;
global_settings { assumed_gamma 1.0 max_trace_level 6 }
camera { location <0, 3, -9> look_at <0, 1, 0> angle 50 }
light_source { <-6, 10, -6> color rgb 1 }
light_source { <8, 6, -3> color rgb 0.5 }
plane { y, 0 pigment { checker color rgb 0.9 color rgb 0.2 scale 1.5 } finish { reflection 0.2 } }
#declare I = 0;
#while (I < 60)
  #declare A = I * 0.61803 * 2 * pi;
  #declare R = 1 + 0.06 * I;
  sphere { <R * cos(A), 0.3 + mod(I, 5) * 0.35, 2 + R * sin(A)>, 0.28
    pigment { color rgb <mod(I, 3) / 2, mod(I, 5) / 4, mod(I, 7) / 6> }
    finish { specular 0.6 reflection 0.3 } }
  #declare I = I + 1;
#end
sphere { <0, 1.2, 1>, 1.2 pigment { granite scale 0.6 } finish { reflection 0.4 phong 0.8 } }
box { <-1, 0, 4>, <1, 2.5, 5> pigment { marble turbulence 0.8 } rotate y * 30 }
