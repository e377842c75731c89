module kymo.example/golden

go 1.19
